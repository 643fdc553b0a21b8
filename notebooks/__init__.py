"""The notebooks, shipped as ``powertrain._notebooks`` (``powertrain examples -o DIR``)."""
