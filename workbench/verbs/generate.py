"""`ascend-workbench generate`: one prompt through a model in this process, greedy by default.

    ascend-workbench generate --model smollm2 --prompt "The capital of France is" --max-tokens 8
    ascend-workbench generate --model tiny --prompt "Hello" --json        # text plus token ids
    ascend-workbench generate --model /path/to/ckpt --prompt "Hi" --chat --device npu --dtype bfloat16

`--model` takes an embedded name (prepared on first use) or a Hugging Face checkpoint directory. The
work happens in `workbench.embedded_models.generation`; this module only maps flags to a request.
"""

from __future__ import annotations

import argparse
import json

from workbench.embedded_models.api import DTYPES, Engine, GenerationRequest, generate
from workbench.verbs._common import add_json_print

HELP = "generate text from one prompt (greedy by default)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="tiny, smollm2, or a Hugging Face checkpoint directory")
    parser.add_argument("--prompt", required=True, help="the prompt text")
    parser.add_argument("--max-tokens", type=int, default=32, help="most tokens to generate (default 32)")
    parser.add_argument(
        "--engine",
        choices=[e.value for e in Engine],
        default=Engine.TRANSFORMERS.value,
        help="transformers (reference, default) or executor (ascend_backend's model executor)",
    )
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda[:N], npu[:N] or auto")
    parser.add_argument(
        "--dtype", choices=DTYPES, default="auto", help="auto: float32 on cpu, the checkpoint's dtype elsewhere"
    )
    parser.add_argument("--chat", action="store_true", help="send the prompt as a user turn via the chat template")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (with --temperature > 0)")
    add_json_print(parser, "one object with the text and the token ids")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    request = GenerationRequest(
        model=args.model,
        prompt=args.prompt,
        max_tokens=args.max_tokens,
        engine=Engine(args.engine),
        device=args.device,
        dtype=args.dtype,
        chat=args.chat,
        temperature=args.temperature,
        seed=args.seed,
    )
    result = generate(request)
    print(json.dumps(result.to_dict(), ensure_ascii=False) if args.json else result.text)
    return 0
