"""Go's text/template as Helm runs it (Sprig and Helm's own functions), small and pure Python: `parse` turns a
template's text into a tree, `execute` renders it over plain data (dicts, lists, str, int, float, bool, None)."""

from kvdoctor.scan.gotemplate.execute import Renderer, TemplateError
from kvdoctor.scan.gotemplate.parse import ParseError, parse

__all__ = ["ParseError", "Renderer", "TemplateError", "parse"]
