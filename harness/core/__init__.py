"""Types, errors, constants, limits and YAML loading: the floor every other package stands on."""
