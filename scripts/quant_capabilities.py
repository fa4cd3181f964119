"""Write or check `workbench/truth/data/quant_capabilities.json`: what vllm-ascend's loader accepts, per release tag.

Each row of the table is one capability (a quant type on a layer kind, a KV-cache layout, a lookup the
loader makes, a compressed-tensors rule) and, per tag, whether the loader supports it and the line of
vllm-ascend's source that says so. The lines are not typed by hand: each tag's entry names a file and a
pattern, and this script finds the line in the mirror (`git show TAG:FILE`), so a cite is always
`file@tag:line` of real source.

    python -m scripts.quant_capabilities --mirror /work/.mirror/vllm-project+vllm-ascend/repo          # write
    python -m scripts.quant_capabilities --mirror ... --check    # exit 1 when the JSON and the mirror disagree

The checkpoint linter (`workbench/lint/checkpoint.py`) reads the JSON; a release between two tags is
judged by the older tag's column (the loader changes at releases, and every tag here is a release). Which
quantization methods a release accepts at all is not a row here: the checkpoint lint takes it from the table
the command lint and the scan share (`workbench/truth/capabilities.py`, read by
scripts/config_truth/capabilities.py from NPUPlatform.supported_quantization at every tag).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

TAGS = ("v0.9.1", "v0.11.0", "v0.13.0", "v0.18.0", "v0.23.0", "v0.25.1rc1", "main")
OUT = Path(__file__).resolve().parent.parent / "workbench" / "truth" / "data" / "quant_capabilities.json"
Q = "vllm_ascend/quantization/"
M = Q + "methods/"
MS = Q + "modelslim_config.py"  # v0.18.0 onward
NEW = ("v0.18.0", "v0.23.0", "v0.25.1rc1", "main")


def each(tags, supported, file, pattern):
    return {tag: (supported, file, pattern) for tag in tags}


def linear(name, v091, v011, v013, new, supported_new=True, main=None):
    """A msmodelslim linear quant type: v0.9.1 quantizer map, v0.11.0/v0.13.0 method map, registry after."""
    cells = {"v0.9.1": v091, "v0.11.0": v011, "v0.13.0": v013}
    cells.update(each(NEW, supported_new, *new))
    if main is not None:
        cells["main"] = main
    return cells


MAP_091 = (Q + "quantizer.py", r"^SUPPORT_ASCEND_QUANTIZER_TYPE = \{")
MAP_1X = (Q + "utils.py", r"^ASCEND_QUANTIZATION_METHOD_MAP")

ROWS = [
    {
        "id": "format.ascend",
        "what": "quantization 'ascend': msmodelslim's quant_model_description.json",
        "cells": each(TAGS, True, "vllm_ascend/platform.py", r"supported_quantization"),
    },
    {
        "id": "format.description_file",
        "what": "the description file the 'ascend' method reads (json-loaded at "
        "start-up: a file that is not JSON stops the server)",
        "cells": {
            **{
                t: (True, Q + "quant_config.py", r'return \["quant_model_description.json"\]')
                for t in ("v0.9.1", "v0.11.0", "v0.13.0")
            },
            **each(NEW, True, MS, r'^MODELSLIM_CONFIG_FILENAME = "quant_model_description.json"'),
        },
    },
    {
        "id": "linear.W8A8",
        "what": "W8A8 (static) on a dense linear",
        "cells": linear(
            "W8A8",
            (True, Q + "quantizer.py", r'"W8A8": W8A8Quantizer'),
            (True, Q + "utils.py", r'^    "W8A8": \{'),
            (True, Q + "utils.py", r'^    "W8A8": \{'),
            (M + "w8a8_static.py", r'@register_scheme\("W8A8", "linear"\)'),
        ),
    },
    {
        "id": "linear.W8A8_DYNAMIC",
        "what": "W8A8_DYNAMIC on a dense linear",
        "cells": linear(
            "W8A8_DYNAMIC",
            (True, Q + "quantizer.py", r'"W8A8_DYNAMIC": W8A8DYNAMICQuantizer'),
            (True, Q + "utils.py", r'^    "W8A8_DYNAMIC": \{'),
            (True, Q + "utils.py", r'^    "W8A8_DYNAMIC": \{'),
            (M + "w8a8_dynamic.py", r'@register_scheme\("W8A8_DYNAMIC", "linear"\)'),
        ),
    },
    {
        "id": "linear.W4A8_DYNAMIC",
        "what": "W4A8_DYNAMIC on a dense linear (removed on main: MoE only)",
        "cells": linear(
            "W4A8_DYNAMIC",
            (True, Q + "quantizer.py", r'"W4A8_DYNAMIC": W4A8DYNAMICQuantizer'),
            (True, Q + "utils.py", r'^    "W4A8_DYNAMIC": \{'),
            (True, Q + "utils.py", r'^    "W4A8_DYNAMIC": \{'),
            (M + "w4a8.py", r'@register_scheme\("W4A8_DYNAMIC", "linear"\)'),
            main=(False, M + "w4a8.py", r'@register_scheme\("W4A8_DYNAMIC", "moe"\)'),
        ),
    },
    {
        "id": "linear.W8A16",
        "what": "W8A16 (int8 weight-only) on a dense linear",
        "cells": linear(
            "W8A16",
            (False, *MAP_091),
            (False, *MAP_1X),
            (True, Q + "utils.py", r'^    "W8A16": \{'),
            (M + "w8a16.py", r'@register_scheme\("W8A16", "linear"\)'),
        ),
    },
    {
        "id": "linear.W4A16",
        "what": "W4A16 on a dense linear (vllm-ascend runs W4A16 on MoE experts only)",
        "cells": linear(
            "W4A16",
            (False, *MAP_091),
            (False, *MAP_1X),
            (False, Q + "utils.py", r'^    "W4A16": \{'),
            (M + "w4a16.py", r'@register_scheme\("W4A16", "moe"\)'),
            supported_new=False,
        ),
    },
    {
        "id": "kv.c8_antiquant",
        "what": "C8 KV cache as kv_quant_type: C8 with <attn>.key/value_antiquant_scale",
        "cells": {
            "v0.9.1": (False, Q + "quant_config.py", r"'fa_quant_type' in self.quant_description.keys\(\)"),
            "v0.11.0": (True, Q + "quant_config.py", r"'kv_quant_type'\) == 'C8'"),
            "v0.13.0": (False, Q + "quant_config.py", r"'fa_quant_type' in self.quant_description.keys\(\)"),
            **each(NEW, False, MS, r'"\.?k_proj\.kv_cache_scale": "\.?attn\.k_cache_scale"'),
        },
    },
    {
        "id": "kv.c8_cache_scale",
        "what": "C8 KV cache as kv_cache_type: C8 with k_proj/v_proj.kv_cache_scale/offset",
        "cells": {
            "v0.9.1": (False, Q + "quant_config.py", r"'fa_quant_type' in self.quant_description.keys\(\)"),
            "v0.11.0": (False, Q + "quant_config.py", r"'kv_quant_type'\) == 'C8'"),
            "v0.13.0": (False, Q + "quant_config.py", r"'fa_quant_type' in self.quant_description.keys\(\)"),
            **each(NEW, True, MS, r'"\.?k_proj\.kv_cache_scale": "\.?attn\.k_cache_scale"'),
        },
    },
    {
        "id": "lookup.lm_head_guarded",
        "what": "a description without lm_head.weight: the head's lookup is guarded "
        "(unsupported = quant_description['lm_head.weight'] raises KeyError, vllm-ascend #8367)",
        "cells": {
            **{
                t: (False, Q + "quant_config.py", r"elif isinstance\(layer, VocabParallelEmbedding\)")
                for t in ("v0.9.1", "v0.11.0", "v0.13.0")
            },
            **each(("v0.18.0", "v0.25.1rc1", "main"), False, MS, r"elif isinstance\(layer, VocabParallelEmbedding\)"),
            "v0.23.0": (True, MS, r"if not self._has_quant_weight\(prefix, self.packed_modules_mapping\)"),
        },
    },
    {
        "id": "lookup.linear_entry",
        "what": "every linear's '<prefix>.weight' is looked up in the description "
        "(a layer without an entry, e.g. an MTP layer, raises KeyError: vllm-ascend #5794)",
        "cells": {
            "v0.9.1": (True, Q + "quantizer.py", r"quant_type = quant_description\[prefix \+ '.weight'\]"),
            **each(
                ("v0.11.0", "v0.13.0"), True, Q + "utils.py", r"quant_type = quant_description\[prefix \+ '.weight'\]"
            ),
            **each(NEW, True, MS, r'quant_type = quant_description\[prefix \+ ".weight"\]'),
        },
    },
    {
        "id": "fused.same_type",
        "what": "the shards of a fused layer (q/k/v, gate/up) must share one quant type",
        "cells": {
            "v0.9.1": (True, Q + "quantizer.py", r"Not all shards of"),
            **each(("v0.11.0", "v0.13.0"), True, Q + "utils.py", r"Not all shards of"),
            **each(NEW, True, MS, r"Not all shards of"),
        },
    },
    {
        "id": "ct.static_symmetric_only",
        "what": "compressed-tensors static W8A8: symmetric inputs only",
        "cells": {
            **each(("v0.9.1", "v0.11.0"), False, "vllm_ascend/platform.py", r"supported_quantization"),
            "v0.13.0": (True, Q + "compressed_tensors/compressed_tensors.py", r"def _is_static_tensor_w8a8"),
            **each(NEW, True, Q + "compressed_tensors_config.py", r"def _is_static_tensor_w8a8"),
        },
    },
    {
        "id": "w4a8.group_size_default",
        "what": "W4A8_DYNAMIC linear: group_size read from the description, 256 when absent (vllm-ascend #8770)",
        "cells": {
            **each(("v0.9.1", "v0.11.0", "v0.13.0"), True, Q + "w4a8_dynamic.py", r'"group_size", 256\)'),
            **each(("v0.18.0", "v0.23.0", "v0.25.1rc1"), True, M + "w4a8.py", r'get\("group_size", 256\)'),
            "main": (False, M + "w4a8.py", r'@register_scheme\("W4A8_DYNAMIC", "moe"\)'),
        },
    },
    {
        "id": "detect.ascend_first",
        "what": "with a description present the ascend method is chosen over "
        "config.json's quantization_config (vllm-ascend #4313)",
        "cells": {
            **{
                t: (True, Q + "quant_config.py", r"def override_quantization_method")
                for t in ("v0.9.1", "v0.11.0", "v0.13.0")
            },
            **each(NEW, True, MS, r"def override_quantization_method"),
        },
    },
    {
        "id": "scales.weight_scale",
        "what": "W8A8_DYNAMIC multiplies by weight_scale (a NaN or zero scale is "
        "served as NaN or zero outputs, vllm-ascend #6980)",
        "cells": {
            **{
                t: (True, Q + "w8a8_dynamic.py", r'params_dict\["weight_scale"\]')
                for t in ("v0.9.1", "v0.11.0", "v0.13.0")
            },
            **each(NEW, True, M + "w8a8_dynamic.py", r'params_dict\["weight_scale"\]'),
        },
    },
]


def show(mirror: Path, tag: str, file: str) -> list[str]:
    done = subprocess.run(["git", "-C", str(mirror), "show", f"{tag}:{file}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{file} is not at {tag} in {mirror}: {done.stderr.strip()}")
    return done.stdout.splitlines()


def build(mirror: Path) -> dict:
    rows = []
    cache: dict[tuple[str, str], list[str]] = {}
    for spec in ROWS:
        cells = {}
        for tag in TAGS:
            supported, file, pattern = spec["cells"][tag]
            lines = cache.setdefault((tag, file), show(mirror, tag, file))
            hits = [i for i, line in enumerate(lines, start=1) if re.search(pattern, line)]
            if not hits:
                raise SystemExit(f"{spec['id']}: /{pattern}/ not found in {file}@{tag}")
            cells[tag] = {"supported": supported, "cite": f"{file}@{tag}:{hits[0]}", "line": lines[hits[0] - 1].strip()}
        rows.append({"id": spec["id"], "what": spec["what"], "tags": cells})
    return {
        "about": "What vllm-ascend's quantization loader accepts, per release tag: one row per capability, each "
        "cell cited file@tag:line in vllm-ascend's source (read from the mirror by scripts/quant_capabilities.py, "
        "which also checks this file). 'supported' false means the loader refuses or ignores it at that tag.",
        "tags": list(TAGS),
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mirror", type=Path, required=True, help="a clone of vllm-project/vllm-ascend with its tags")
    parser.add_argument("--check", action="store_true", help="compare with the JSON instead of writing it")
    args = parser.parse_args()
    table = build(args.mirror)
    text = json.dumps(table, indent=1) + "\n"
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} differs from the mirror; rerun without --check", file=sys.stderr)
            return 1
        print(f"{OUT}: {len(table['rows'])} rows x {len(TAGS)} tags match the mirror")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}: {len(table['rows'])} rows x {len(TAGS)} tags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
