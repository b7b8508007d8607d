#!/bin/sh
# Builds metalambda-init for linux/amd64 (reaper.c) into reaper-linux-amd64,
# which package sandbox embeds: a static program with no libc, no dynamic
# loader and no section but its code (a few hundred bytes of it). Run by
# go generate ./internal/gateway/sandbox, on an amd64 host with gcc.
# Other architectures have no reaper: their zygotes' children keep the
# Python init (serve_init in internal/gateway/lambda/python_zygote.py).
set -eu
cd "$(dirname "$0")"
CC=${CC:-gcc}
$CC -static -nostdlib -nostartfiles -ffreestanding -fno-pie -no-pie \
	-Os -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-stack-protector -fcf-protection=none -fno-ident \
	-Wall -Werror \
	-Wl,--build-id=none -Wl,-z,noexecstack -Wl,-z,noseparate-code -Wl,-z,norelro -s \
	-o reaper-linux-amd64.tmp reaper.c
mv reaper-linux-amd64.tmp reaper-linux-amd64
