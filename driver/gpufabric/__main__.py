# SPDX-License-Identifier: Apache-2.0
"""Allow ``python -m gpufabric``."""

from gpufabric.cli import main

main()
