"""Right-sizing before a request: how much GPU memory a model needs (``estimate``, pure) and
which offered sizes and MIG profiles hold it, cheapest first (``fits``)."""
