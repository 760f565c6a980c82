"""OS noise: measuring it (gap detector, FWQ, FTQ, osnoise/timerlat) and injecting it."""
