"""The application layer: the only code that builds a Spark session, reads, writes and prints."""
