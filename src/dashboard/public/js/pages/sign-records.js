import { h } from '../dom.js';
import { heading } from '../ui.js';
// Stub: drawn by its helper.
export const signRecordPages = {
    signRecords: { title: 'signRecords', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('signRecords'), h('p', null, 'Not built yet.')) },
};
