from scripts.kernel_truth.audit import main

raise SystemExit(main())
