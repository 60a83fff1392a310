"""Slow, obvious oracles the product's fast paths are held to (the product never imports
them)."""
