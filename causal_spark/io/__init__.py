"""Input and output of files: sources, and the readers of native log formats (`readers`)."""
