# SPDX-License-Identifier: Apache-2.0
# A golden AMI for one gpufabric profile: Packer starts a builder instance from a base AMI and runs
# playbooks/bake.yml on it with Packer's Ansible provisioner (the roles in bake mode: installed and
# configured, nothing loaded or started, kernel modules built for the image's kernels). The
# provisioner first installs collections/requirements.yml (gpufabric.cluster from this checkout, and
# the collections its roles call) into var.collections_path, with the ansible-galaxy and
# ansible-playbook of the checkout's venv (var.ansible_bin; scripts/bootstrap-venv makes it). From the
# repository root (relative paths below are resolved there; .cache/ is git-ignored), either
#
#   # Packer 1.7.0 or later (from 1.10 on the only form: the plugins are no longer built in)
#   packer init examples/packer
#   packer build -var gpufabric_profile=aws/p5.48xlarge -var vars_file=bake-vars.yml examples/packer
#
#   # Packer 1.6.6 (Debian 12's packer package: amazon-ebs and ansible built in), this file alone
#   packer build -var gpufabric_profile=aws/p5.48xlarge -var vars_file=bake-vars.yml \
#     examples/packer/gpufabric-bake.pkr.hcl
#
# bake-vars.yml holds the values the roles ask for by name and never default (nvidia_driver_branch,
# nvidia_driver_version, ...: docs/fabric-roles.md). docs/operations.md has the whole procedure.
# The Packer version and plugins the directory form needs: versions.pkr.hcl beside this file.

variable "gpufabric_profile" {
  type        = string
  description = "The catalog profile the image is for (`gpufabric catalog list`), e.g. aws/p5.48xlarge."
}

variable "vars_file" {
  type        = string
  description = "YAML file of extra variables for bake.yml: the operator's choices the roles ask for by name."
}

variable "collections_path" {
  type        = string
  default     = ".cache/packer/collections"
  description = "Where the provisioner installs collections/requirements.yml (gpufabric.cluster and the collections its roles call), and where ansible-playbook loads them from."
}

variable "ansible_bin" {
  type        = string
  default     = ".venv/bin"
  description = "Directory of the ansible-playbook and ansible-galaxy the provisioner runs: the checkout's venv (relative to the repository root), so neither needs to be on PATH."
}

variable "region" {
  type    = string
  default = "us-east-1"
}

# Baking needs no GPU: bake mode loads no module and builds kernel modules for the installed
# kernels, so any x86_64 instance with room for the driver build will do.
variable "builder_instance_type" {
  type    = string
  default = "c6i.2xlarge"
}

variable "source_ami_name" {
  type        = string
  default     = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
  description = "Name filter of the base AMI; the newest match from source_ami_owner is used."
}

variable "source_ami_owner" {
  type        = string
  default     = "099720109477" # Canonical
  description = "AWS account that publishes the base AMI."
}

variable "ssh_username" {
  type    = string
  default = "ubuntu"
}

variable "volume_size_gb" {
  type    = number
  default = 100
}

locals {
  # AMI names allow [A-Za-z0-9()[] ./'@_-]; profile names carry a slash.
  profile_slug = replace(var.gpufabric_profile, "/", "-")
  timestamp    = formatdate("YYYYMMDDhhmmss", timestamp())
}

source "amazon-ebs" "gpufabric" {
  region        = var.region
  instance_type = var.builder_instance_type
  ssh_username  = var.ssh_username
  ami_name      = "gpufabric-${local.profile_slug}-${local.timestamp}"

  source_ami_filter {
    filters = {
      name                = var.source_ami_name
      root-device-type    = "ebs"
      virtualization-type = "hvm"
    }
    owners      = [var.source_ami_owner]
    most_recent = true
  }

  # iops and throughput: gp3's baseline, stated because Packer 1.6.6 refuses gp3 without both.
  launch_block_device_mappings {
    device_name           = "/dev/sda1"
    volume_size           = var.volume_size_gb
    volume_type           = "gp3"
    iops                  = 3000
    throughput            = 125
    delete_on_termination = true
  }

  tags = {
    gpufabric_profile = var.gpufabric_profile
    gpufabric_baked   = "true"
  }
}

build {
  sources = ["source.amazon-ebs.gpufabric"]

  provisioner "ansible" {
    playbook_file = "${path.root}/../../playbooks/bake.yml"
    # The venv's Ansible, the one gpufabric runs (PATH's would be used otherwise, if there is one):
    # Packer runs `command --version` already in `packer validate`.
    command        = "${var.ansible_bin}/ansible-playbook"
    galaxy_command = "${var.ansible_bin}/ansible-galaxy"
    # Before the playbook: ansible-galaxy collection install -r collections/requirements.yml
    # -p var.collections_path --force. The file installs gpufabric.cluster from the working
    # directory (type: dir, source: .), so Packer runs from the repository root; the path relative to
    # it makes `packer validate` fail anywhere else. --force: the checkout's version number does not
    # move with every edit, and without it a copy installed by an earlier build would be kept.
    galaxy_file          = "collections/requirements.yml"
    collections_path     = var.collections_path
    galaxy_force_install = true
    user                 = var.ssh_username
    # Ansible talks to the instance directly; Packer's SSH proxy adds nothing here.
    use_proxy = false
    # JSON, so gpufabric_bake arrives as a boolean rather than the string "true".
    extra_arguments = [
      "--extra-vars", jsonencode({ gpufabric_profile = var.gpufabric_profile, gpufabric_bake = true }),
      "--extra-vars", "@${var.vars_file}",
    ]
    # The provisioner installs into collections_path but does not point ansible-playbook there.
    ansible_env_vars = [
      "ANSIBLE_COLLECTIONS_PATH=${var.collections_path}",
      "ANSIBLE_PIPELINING=True",
    ]
  }
}
