"""Example inputs, shipped as ``powertrain._examples`` (``powertrain examples -o DIR``)."""
