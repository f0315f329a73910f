"""Everything between a model and the environments: policies, the driver, episode records."""
