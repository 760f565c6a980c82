"""`coreplane run` and `coreplane profile`: a program under the runtime, in a cell."""
