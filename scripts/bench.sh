#!/usr/bin/env bash
echo "make bench: not built yet"
exit 1
