"""Profiles of real runs (`coreplane-profile/1`): reading, checking, saving, what the models take from them, their summary."""
