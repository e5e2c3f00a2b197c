/**
 * Building the page: elements from tag, attributes and children, text always as text nodes.
 * Nothing in the dashboard writes markup from strings (the policy's Trusted Types would refuse
 * it anyway), so whatever an owner or the gateway wrote shows as text, never as HTML.
 */
export type Child = Node | string | number | false | null | undefined | readonly Child[];
export type Attrs = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === 'function') {
      element.addEventListener(name.replace(/^on/, '').toLowerCase(), value);
    } else if (name === 'href' && typeof value === 'string' && !/^[/#]/.test(value)) {
      // Only the dashboard's own paths and fragments: a link never runs a `javascript:` URL.
      throw new Error(`refusing the link ${JSON.stringify(value)}`);
    } else {
      element.setAttribute(name === 'className' ? 'class' : name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces every child of `parent`. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild !== null) parent.removeChild(parent.firstChild);
  append(parent, children);
}

let announced = 0;
/** Says something to screen readers through the page's polite live region (#announcer). */
export function announce(message: string): void {
  const region = document.getElementById('announcer');
  if (region === null) return;
  const turn = ++announced;
  // Emptied first, so the same sentence twice is read twice.
  region.textContent = '';
  setTimeout(() => {
    if (turn === announced) region.textContent = message;
  }, 50);
}

let ids = 0;
/** An id unique in the page, for label/for, aria-describedby and aria-labelledby. */
export function uniqueId(prefix: string): string {
  ids += 1;
  return `${prefix}-${ids}`;
}
