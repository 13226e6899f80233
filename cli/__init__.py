"""The llamay command line: a thin Click layer over the library."""
