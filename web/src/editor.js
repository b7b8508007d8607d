// The code editor of the Functions pages: CodeMirror 6 over a <textarea>, which keeps
// the value so that plain and htmx form posts send it.
//
//   const ed = window.mlEditor.create(textarea, {language: 'javascript' | 'python'});
//   ed.setDiagnostics([{line: 3, column: 7, message: 'SyntaxError: ...'}]); // 1-based
//   ed.value();
//
// Tab is left to the browser (focus moves on), so the page stays usable with the
// keyboard.
//
// The setup is composed here from the CodeMirror 6 packages (the smaller part of the
// "codemirror" package's basicSetup that an editor of short hooks needs): line
// numbers, highlighting, bracket matching and closing, undo history and the default
// keymap.
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection, highlightSpecialChars,
} from '@codemirror/view';
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { syntaxHighlighting, defaultHighlightStyle, bracketMatching, indentOnInput } from '@codemirror/language';
import { closeBrackets } from '@codemirror/autocomplete';
import { javascript } from '@codemirror/lang-javascript';
import { python } from '@codemirror/lang-python';
import { setDiagnostics, lintGutter } from '@codemirror/lint';

const languages = { javascript, python };

const basicSetup = [
  lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), drawSelection(), indentOnInput(),
  syntaxHighlighting(defaultHighlightStyle, { fallback: true }), bracketMatching(), closeBrackets(), highlightActiveLine(),
  history(), keymap.of([...defaultKeymap, ...historyKeymap]),
];

// diagnostic turns a 1-based line and column into a CodeMirror range in doc.
function diagnostic(doc, d) {
  const lineNo = Math.min(Math.max(d.line || 1, 1), doc.lines);
  const line = doc.line(lineNo);
  const from = Math.min(line.from + Math.max((d.column || 1) - 1, 0), line.to);
  return { from, to: Math.max(from, line.to), severity: d.severity || 'error', message: d.message || '' };
}

function labelOf(textarea) {
  if (textarea.labels && textarea.labels.length > 0) {
    return textarea.labels[0].textContent.trim();
  }
  return textarea.getAttribute('aria-label') || 'Code';
}

function create(textarea, options = {}) {
  const lang = languages[options.language] || languages.javascript;
  const view = new EditorView({
    doc: textarea.value,
    extensions: [
      basicSetup,
      lang(),
      lintGutter(),
      EditorView.contentAttributes.of({ 'aria-label': labelOf(textarea) }),
      EditorView.updateListener.of((u) => {
        if (u.docChanged) {
          textarea.value = u.state.doc.toString();
          textarea.dispatchEvent(new Event('input', { bubbles: true }));
        }
      }),
    ],
  });
  textarea.insertAdjacentElement('afterend', view.dom);
  textarea.hidden = true;
  return {
    view,
    value: () => view.state.doc.toString(),
    setValue: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    setDiagnostics: (list) => view.dispatch(setDiagnostics(view.state, (list || []).map((d) => diagnostic(view.state.doc, d)))),
    focus: () => view.focus(),
    destroy: () => { view.destroy(); textarea.hidden = false; },
  };
}

window.mlEditor = { create };
