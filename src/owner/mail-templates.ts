/**
 * Every mail the gateway sends, one template each: a plain-text and an HTML part from the same
 * words, naming the product (`mail.productName`) and the deployment's public origin. Whatever
 * is interpolated (an account's name, an email, an address) goes through `escapeHtml` in the
 * HTML part; a subject line takes no interpolated text but the product's name, with line breaks
 * removed, so no value can add a header. Links carry their one-time token in the fragment, which
 * no browser sends to a server (nor in a Referer): it never reaches an access log.
 */

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

/** What every template is given. */
export interface MailContext {
  productName: string;
  /** owner.publicOrigin: where links point. */
  origin: string;
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\'': '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

function oneLine(value: string): string {
  return value.replace(/[\r\n]+/g, ' ');
}

/** Paragraphs of plain text and the one link, as both parts; `lines` are plain text (escaped for HTML here). */
function compose(context: MailContext, subject: string, lines: readonly string[], link?: { label: string; url: string }): RenderedMail {
  const footer = `${context.productName} · ${context.origin}`;
  // "-- " on a line of its own: the signature separator mail programs recognise (RFC 3676 §4.3).
  const text = `${[...lines, ...(link === undefined ? [] : [`${link.label}: ${link.url}`])].join('\n\n')}\n\n-- \n${footer}\n`;
  const html = [
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(oneLine(`${context.productName}: ${subject}`))}</title></head><body style="font-family: sans-serif; line-height: 1.5">`,
    ...lines.map((l) => `<p>${escapeHtml(l)}</p>`),
    ...(link === undefined ? [] : [`<p><a href="${escapeHtml(link.url)}">${escapeHtml(link.label)}</a></p>`]),
    `<hr><p style="color: #555; font-size: 0.9em">${escapeHtml(footer)}</p>`,
    '</body></html>',
  ].join('\n');
  return { subject: oneLine(`${context.productName}: ${subject}`), text, html };
}

export function inviteMail(context: MailContext, { accountName, token, hours }: { accountName: string; token: string; hours: number }): RenderedMail {
  return compose(context, 'you are invited to manage an account', [
    `You are invited to manage the account "${accountName}" on ${context.productName}.`,
    `The link works once, for ${hours} hours. If you did not expect this invite, ignore this mail.`,
  ], { label: 'Accept the invite', url: `${context.origin}/owner/invite#${token}` });
}

export function verifyEmailMail(context: MailContext, { token, hours }: { token: string; hours: number }): RenderedMail {
  return compose(context, 'confirm your email address', [
    `Confirm that this address belongs to your owner account on ${context.productName}.`,
    `The link works once, for ${hours} hours. If you have no such account, ignore this mail.`,
  ], { label: 'Confirm the address', url: `${context.origin}/owner/verify-email#${token}` });
}

export function passwordResetMail(context: MailContext, { token, minutes }: { token: string; minutes: number }): RenderedMail {
  return compose(context, 'reset your password', [
    `Someone (we hope you) asked to reset the password of your owner account on ${context.productName}.`,
    `The link works once, for ${minutes} minutes; choosing a new password signs out every session. If you did not ask, ignore this mail: your password stays as it is.`,
  ], { label: 'Choose a new password', url: `${context.origin}/owner/reset-password#${token}` });
}

/** What a security notice says happened: the audit action's words (owner/mail-notices.ts). */
export function securityNoticeMail(context: MailContext, { what, at, ip, accountName, advice }: { what: string; at: string; ip?: string; accountName?: string; advice?: string }): RenderedMail {
  return compose(context, 'security notice', [
    `${what}${accountName === undefined ? '' : ` (account "${accountName}")`}, at ${at}${ip === undefined ? '' : ` from ${ip}`}.`,
    advice ?? 'If this was you, nothing needs doing. If not, change your password now and tell the account\'s other owners.',
  ]);
}
