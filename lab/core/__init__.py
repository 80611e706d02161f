"""Shared building blocks of the lab's methods: layers and utilities used by more than one method."""
