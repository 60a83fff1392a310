"""Reading inputs and writing the warehouse: Delta tables, the `runs` ledger, the sink."""
