"""Many-core processes: the arbiter daemon's front end, its socket client, and the vcore API's Python binding."""
