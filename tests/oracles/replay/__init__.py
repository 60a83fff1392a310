"""The reference replay engine (`engine`) and the reference protocol classes (`protocols`)."""
