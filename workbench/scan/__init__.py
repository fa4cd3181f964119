"""What in a service's code ties it to CUDA, and what replaces each tie on Ascend (docs/METHOD.md §1).

The first step of a porting session (notebook 00, `ascend-workbench scan PATH...`): static analysis
that never imports or runs the scanned code.

    walker        which files: ignores (.git, caches, virtual environments; overridable), symlink loops
    file_kinds    which rules a file gets, by name (and #! line)
    python_rules  Python by AST: torch.cuda and aliases, .cuda(), device strings, amp, backends, graphs,
                  NCCL, extensions, Triton, CUDA-only libraries, FP8, vLLM options and env vars
    python_values local constant propagation for device/backend/module strings ("unresolved" if built
                  at run time from parts the AST cannot see)
    text_rules    shell, YAML/JSON/TOML, requirements and lock files, Dockerfiles, CMake, C/C++, .cu
    catalog       the names, packages, env vars and values the rules recognise
    file_scan     one file -> hits and problems (syntax errors, binary, undecodable, unreadable, too large)
    runner        the scan, parallel over files -> ScanReport
    mapping       rule -> counterpart, severity, verify step, citations (policy/scan/cuda-mapping.yaml)
    report        counts by category, severity, file and rule; pandas tables
    outputs       JSON and CSV, atomic, with provenance;  summary_text: the terminal summary
    charts        plotly figures;  notebook: what notebook 00 calls

Submodules load on first use (`scan.charts`, `scan.outputs`, ...), so worker processes and the CLI
import only what they need.
"""
