from mfumon.cli import main

raise SystemExit(main())
