"""The main job (`coreplane study`): profile → project → validate → an HTML report, on bundled and Debian programs."""
