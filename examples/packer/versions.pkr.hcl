# SPDX-License-Identifier: Apache-2.0
# What gpufabric-bake.pkr.hcl needs in the directory form (`packer init examples/packer`, then
# `packer build ... examples/packer`); `packer init` installs the plugins. required_plugins and
# `packer init` came with Packer 1.7.0; from 1.10.0 on Packer has no plugins built in, and this
# block is how it gets them. The ansible plugin's galaxy_file,
# collections_path and galaxy_force_install are in all its releases (1.1.4 and later also give
# ansible_env_vars to ansible-galaxy).
#
# Kept apart from the template so that Packer 1.6.6 (Debian 12's packer package), which predates
# this block and refuses the directory, can validate and build the template alone (1.6.6 has the
# amazon-ebs builder and the ansible provisioner built in). tests/unit/test_ops_content.py
# validates the template with packer where it is installed, and parses this file with python-hcl2.

packer {
  required_version = ">= 1.7.0"

  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.3.0"
    }
    ansible = {
      source  = "github.com/hashicorp/ansible"
      version = ">= 1.1.0"
    }
  }
}
