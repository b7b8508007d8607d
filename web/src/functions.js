// The script of a function's page: the code editor over the source textarea, its
// error markers, and the small helpers of the test and env forms. The page works
// without it (a plain textarea, whole-page form posts); with it, htmx swaps results in
// place and compile errors are marked in the editor at their line and column, besides
// being listed in text.
(function () {
  let editor = null;

  function language() {
    const select = document.getElementById('fn-runtime');
    return select ? select.value : '';
  }

  function startEditor() {
    const textarea = document.querySelector('textarea[data-editor]');
    if (!textarea || !window.mlEditor) {
      return;
    }
    editor = window.mlEditor.create(textarea, { language: language() || textarea.dataset.language });
  }

  // markProblems marks the editor with the problems listed in container: those with a
  // position (data-line, data-column) become diagnostics; none clears the marks.
  function markProblems(container) {
    if (!editor) {
      return;
    }
    const items = container ? container.querySelectorAll('[data-line]') : [];
    editor.setDiagnostics(Array.from(items, (li) => ({
      line: Number(li.dataset.line),
      column: Number(li.dataset.column),
      message: li.textContent.trim(),
    })));
  }

  function setTestRequest(text) {
    const area = document.getElementById('test-request');
    if (!area) {
      return;
    }
    try {
      area.value = JSON.stringify(JSON.parse(text), null, 2);
    } catch (e) {
      area.value = text;
    }
    area.focus();
  }

  function addEnvRow() {
    const rows = document.getElementById('env-rows');
    const last = rows && rows.lastElementChild;
    if (!last) {
      return;
    }
    const row = last.cloneNode(true);
    row.querySelectorAll('input').forEach((input) => { input.value = ''; });
    rows.appendChild(row);
    row.querySelector('input').focus();
  }

  document.addEventListener('DOMContentLoaded', () => {
    startEditor();
    markProblems(document.getElementById('save-result'));
    const runtime = document.getElementById('fn-runtime');
    if (runtime) {
      runtime.addEventListener('change', () => {
        if (editor) {
          editor.destroy();
          startEditor();
        }
      });
    }
  });

  document.addEventListener('click', (event) => {
    const use = event.target.closest('[data-use-request]');
    if (use) {
      setTestRequest(use.dataset.useRequest);
      return;
    }
    if (event.target.closest('#use-template')) {
      setTestRequest(document.getElementById('test-template').value);
      return;
    }
    if (event.target.closest('#env-add')) {
      addEnvRow();
    }
  });

  document.addEventListener('htmx:afterSwap', (event) => {
    const id = event.detail.target && event.detail.target.id;
    if (id === 'save-result' || id === 'replay-result') {
      markProblems(event.detail.target);
    }
  });
}());
