from llm_ide.codeview.files import LocalFiles
from llm_ide.codeview.index import FileIndex, build_index, is_python
from llm_ide.codeview.view import CodeView

__all__ = ["CodeView", "FileIndex", "LocalFiles", "build_index", "is_python"]
