/**
 * Forms: every control has a visible label, an optional hint and an error line tied to it
 * (aria-describedby), so a screen reader reads the message with the field. Validation is the
 * owner API's: a form posts what was typed, and the answer's `field` puts the gateway's
 * sentence next to that field (aria-invalid, focus moved there); an error without a field shows
 * above the buttons. One source of rules, never a second copy in the page to drift.
 */
import { ApiError, describeError } from './api.js';
import { announce, h, replace, uniqueId } from './dom.js';
function makeField(name, label, control, hint, inline = false) {
    const id = uniqueId(`field-${name.replace(/[^a-z0-9]/gi, '')}`);
    control.id = id;
    control.name = name;
    const hintId = `${id}-hint`;
    const errorId = `${id}-error`;
    const error = h('p', { id: errorId, class: 'field-error', hidden: true });
    control.setAttribute('aria-describedby', hint === undefined ? errorId : `${hintId} ${errorId}`);
    const labelElement = h('label', { for: id }, label);
    const row = inline
        ? h('div', { class: 'field field-inline' }, control, labelElement, hint === undefined ? null : h('p', { id: hintId, class: 'hint' }, hint), error)
        : h('div', { class: 'field' }, labelElement, hint === undefined ? null : h('p', { id: hintId, class: 'hint' }, hint), control, error);
    return {
        name,
        row,
        control,
        setError(message) {
            if (message === undefined) {
                error.hidden = true;
                error.textContent = '';
                control.removeAttribute('aria-invalid');
            }
            else {
                error.hidden = false;
                error.textContent = message;
                control.setAttribute('aria-invalid', 'true');
            }
        },
    };
}
export function textField(options) {
    const attrs = {
        required: options.required === true,
        autocomplete: options.autocomplete ?? 'off',
        inputmode: options.inputmode,
        placeholder: options.placeholder,
        spellcheck: 'false',
    };
    const control = options.multiline === true
        ? h('textarea', { ...attrs, rows: 3 })
        : h('input', { ...attrs, type: options.type ?? 'text', size: options.size });
    control.value = options.value ?? '';
    return makeField(options.name, options.label, control, options.hint);
}
export function checkboxField({ name, label, checked = false, hint }) {
    const control = h('input', { type: 'checkbox' });
    control.checked = checked;
    return makeField(name, label, control, hint, true);
}
export function selectField({ name, label, options, value, hint }) {
    const control = h('select', null, options.map((option) => h('option', { value: option.value }, option.label)));
    if (value !== undefined)
        control.value = value;
    return makeField(name, label, control, hint);
}
/** A form whose submit runs `onSubmit` once at a time, with the gateway's refusals shown where they belong. */
export function form(options) {
    const alert = h('div', { class: 'form-error', role: 'alert', hidden: true });
    const submit = h('button', { type: 'submit', class: options.tone === 'danger' ? 'danger' : 'primary' }, options.submitLabel);
    const element = h('form', { 'aria-label': options.label, novalidate: true }, options.fields.map((field) => field.row), alert, h('div', { class: 'actions' }, submit, options.actions));
    let busy = false;
    element.addEventListener('submit', (event) => {
        event.preventDefault();
        if (busy)
            return;
        busy = true;
        // aria-disabled, not disabled: a disabled button drops the focus, and a confirmation asked
        // from onSubmit (a delete) must give the focus back to it when cancelled.
        submit.setAttribute('aria-disabled', 'true');
        element.setAttribute('aria-busy', 'true');
        for (const field of options.fields)
            field.setError(undefined);
        showFormError(alert, undefined);
        options.onSubmit().catch((error) => {
            const field = error instanceof ApiError ? fieldFor(options.fields, error.field) : undefined;
            if (field !== undefined && error instanceof ApiError) {
                const message = fieldMessage(error, field);
                field.setError(message);
                field.control.focus();
                announce(`${labelOf(field)}: ${message}`);
            }
            else {
                showFormError(alert, describeError(error));
            }
        }).finally(() => {
            busy = false;
            submit.removeAttribute('aria-disabled');
            element.removeAttribute('aria-busy');
        });
    });
    return element;
}
function showFormError(alert, message) {
    alert.hidden = message === undefined;
    replace(alert, message ?? '');
}
/** The field an error names: `scopes.2` is the `scopes` field. */
function fieldFor(fields, name) {
    if (name === undefined)
        return undefined;
    return fields.find((field) => field.name === name) ?? fields.find((field) => name.startsWith(`${field.name}.`));
}
/**
 * The owner API's refusal of one field, as an owner should read it next to that field. Its
 * validation sentences are written for developers and name every field at fault ("Invalid
 * request body: id: Invalid input: expected number, received string; name: Too small: …"), and
 * gatewayctl and the client show them as they are; here only this field's part is kept, and
 * zod's generic phrasings become plain sentences. Sentences the API wrote itself (a slug's
 * rule, a taken id) pass through.
 */
export function fieldMessage(error, field) {
    if (error.status !== 400 || error.code !== 'invalid_request')
        return describeError(error);
    const problems = error.message.replace(/^Invalid [a-z ]+: /, '').replace(/\.$/, '').split('; ');
    const mine = problems.find((problem) => problem.startsWith(`${error.field}: `));
    if (mine === undefined)
        return error.message;
    const said = mine.slice(`${error.field}: `.length);
    for (const [pattern, plain] of PLAIN) {
        const match = pattern.exec(said);
        if (match !== null)
            return plain(match, labelOf(field));
    }
    return `${said.charAt(0).toUpperCase()}${said.slice(1)}.`;
}
/** zod's generic messages (v4), the owner API's own, and what an owner reads instead. */
const PLAIN = [
    [/^Invalid input: expected (number|int)\b/, () => 'Enter a whole number.'],
    [/^Invalid input: expected string\b/, () => 'Enter text.'],
    [/^Too small: expected string to have >=1 characters$/, (_, label) => `Enter ${/^[aeio]/i.test(label) ? 'an' : 'a'} ${label.toLowerCase()}.`],
    [/^Too small: expected string to have >=(\d+) characters$/, ([, n]) => `At least ${n} characters.`],
    [/^Too big: expected string to have <=(\d+) characters$/, ([, n]) => `At most ${n} characters.`],
    [/^Too small: expected number to be >=(\S+)$/, ([, n]) => `Enter ${n} or more.`],
    [/^Too big: expected number to be <=(\S+)$/, ([, n]) => `Enter ${n} or less.`],
    [/^Too big: expected array to have <=(\d+) items$/, ([, n]) => `At most ${n} entries.`],
    [/^Invalid email address$/, () => 'Enter an email address, e.g. name@example.com.'],
    [/^Invalid option: expected one of (.+)$/, ([, list]) => `Choose one of ${list.replaceAll('"|"', '", "')}.`],
    [/^Invalid string: must match pattern /, () => 'Not in the form the hint describes.'],
    // The owner API's own schemas say what they expect in a developer's words too.
    [/^expected (a whole number\b.*)$/, ([, rest]) => `Enter ${rest}.`],
    [/^expected (.+)$/, ([, rest]) => `Use ${rest}.`],
];
function labelOf(field) {
    return field.row.querySelector('label')?.textContent ?? field.name;
}
/** The trimmed text of a field. */
export function valueOf(field) {
    return field.control.value.trim();
}
/** Comma- or space-separated words (scopes), without empties. */
export function listOf(field) {
    return valueOf(field).split(/[\s,]+/).filter((word) => word !== '');
}
/**
 * A whole number typed in a field, or what was typed when it is not one: the owner API then
 * refuses it with a message at that field, as for any other bad value.
 */
export function numberOf(field) {
    const text = valueOf(field);
    return /^[0-9]{1,16}$/.test(text) ? Number(text) : text;
}
