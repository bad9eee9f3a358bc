"""WQL: a declarative window query language and compiler for PySpark."""
