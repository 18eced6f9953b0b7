"""`kvdoctor rules`, `gpus`, `formats`: what kvdoctor knows, listed."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from kvdoctor.commands._run import fail_input


def register(app: typer.Typer) -> None:
    @app.command("rules")
    def list_rules(
        rules: List[Path] = typer.Option([], "--rules", help="Extra rules file(s) to validate and list."),
        facts: bool = typer.Option(False, "--facts", help="List the fact names rules can use instead."),
    ) -> None:
        """List (and validate) the rules, or the fact names they may use."""
        from kvdoctor.base.errors import KvdoctorError

        try:
            if facts:
                from kvdoctor.data.fact_names import fact_registry

                registry = fact_registry()
                for name in sorted(registry.names()):
                    typer.echo(name)
                for namespace in registry.open_namespaces:
                    typer.echo(namespace.listed_as)
                return
            from kvdoctor.explain.families import load_families
            from kvdoctor.rules import load_all_rules
            from kvdoctor.scan.judge import deploy_rules

            for rule in load_all_rules(list(rules)):
                typer.echo(f"{rule.id}  {rule.severity:<7}  {rule.title}")
            for rule in load_families().rules:  # explain-only families (kvdoctor/data/rules/explain.yaml)
                typer.echo(f"{rule.id}  {rule.severity:<7}  {rule.title}  [explain]")
            for rule in deploy_rules():  # the deployment rules of `kvdoctor scan` (kvdoctor/data/rules/scan.yaml)
                typer.echo(f"{rule.id}  {rule.severity:<7}  {rule.title}  [scan]")
        except KvdoctorError as exc:
            fail_input(exc)


    @app.command()
    def gpus() -> None:
        """List the GPUs --gpu knows, with compute capability and memory."""
        from kvdoctor.data.gpus import gpu_table

        seen = set()
        for device in sorted(gpu_table().values(), key=lambda d: (d.capability, d.name)):
            if device.name not in seen:
                seen.add(device.name)
                typer.echo(f"{device.name:<28} SM {device.capability[0]}.{device.capability[1]}  {device.memory_gib:g} GiB")


    @app.command()
    def formats(command: str = typer.Argument("check", help="check, explain, scan, matrix or verify.")) -> None:
        """List the output formats of a command (check's by default)."""
        from kvdoctor.report import registry

        menus = registry.BY_COMMAND
        if command not in menus:
            raise typer.BadParameter(f"no command {command!r} has output formats: use one of {', '.join(menus)}")
        for name in menus[command].available():
            typer.echo(name)
