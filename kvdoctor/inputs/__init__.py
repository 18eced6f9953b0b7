"""The input stage: what the user typed, checked before anything runs (bad input is exit 2): option values
(validate.py), flags against the release's parser (flags.py), the project config file (config_file.py)."""
