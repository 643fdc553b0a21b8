"""The decision wing's cap-table machinery: a posterior in which neighbouring
configurations err together, and the expected loss of a whole cap table under it."""
