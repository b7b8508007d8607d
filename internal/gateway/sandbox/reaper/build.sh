#!/bin/sh
# Builds metalambda-init for linux/amd64 (reaper.c) into reaper-linux-amd64,
# and metalambda-spawn (spawn.c) into spawn-linux-amd64, which package
# sandbox embeds: static programs with no libc, no dynamic loader and no
# section but their code (a few hundred bytes, and a few KiB). Run by
# go generate ./internal/gateway/sandbox, on an amd64 host with gcc.
# Other architectures have neither: their zygotes' children keep the
# Python init (serve_init in internal/gateway/lambda/python_zygote.py) and
# specialize in Python.
set -eu
cd "$(dirname "$0")"
CC=${CC:-gcc}
for prog in reaper spawn; do
	$CC -static -nostdlib -nostartfiles -ffreestanding -fno-pie -no-pie \
		-Os -fno-tree-loop-distribute-patterns -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-stack-protector -fcf-protection=none -fno-ident \
		-Wall -Werror \
		-Wl,--build-id=none -Wl,-z,noexecstack -Wl,-z,noseparate-code -Wl,-z,norelro -s \
		-o $prog-linux-amd64.tmp $prog.c
	mv $prog-linux-amd64.tmp $prog-linux-amd64
done
