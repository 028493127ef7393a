# SPDX-License-Identifier: Apache-2.0
"""gpufabric: configure and prove GPU cluster networks from one fabric catalog."""

__version__ = "0.9.0"
