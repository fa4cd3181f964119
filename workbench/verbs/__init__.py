"""CLI verbs: one module per verb, each declaring HELP, DESCRIPTION and `add_arguments(parser)` (see
workbench.cli); the options they share are declared once in `_common`."""
