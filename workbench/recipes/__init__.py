"""Recipes: the declarative data under `recipes/`, validated into frozen objects.

`reader` is the one reader and error formatter every recipe kind goes through (`Frozen`,
`load_recipe_file`); `serving` holds the serving-recipe models. Other kinds (sweep specs, feature
plans, matrices, op suites, profiling thresholds, scan mappings, ...) live with the code that uses them
and load through `reader`.
"""

from workbench.recipes.reader import (
    Frozen,
    describe_error,
    load_recipe_file,
    read_yaml_mapping,
    resolve_recipe_path,
    validate_recipe,
)
from workbench.recipes.serving import (
    EMBEDDED_PREFIX,
    DeviceKind,
    DType,
    EngineArgs,
    ServingRecipe,
    list_serving_recipes,
    load_serving_recipe,
    parse_bytes,
    resolve_serving_path,
    serving_dir,
    stable_hash,
)

__all__ = [
    "EMBEDDED_PREFIX",
    "DType",
    "DeviceKind",
    "EngineArgs",
    "Frozen",
    "ServingRecipe",
    "describe_error",
    "list_serving_recipes",
    "load_recipe_file",
    "load_serving_recipe",
    "parse_bytes",
    "read_yaml_mapping",
    "resolve_recipe_path",
    "resolve_serving_path",
    "serving_dir",
    "stable_hash",
    "validate_recipe",
]
