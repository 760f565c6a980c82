"""`coreplane doctor`: what this machine offers coreplane, with a verdict and evidence per line."""
