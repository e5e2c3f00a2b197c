import { h } from '../dom.js';
import { heading } from '../ui.js';
// Stub: drawn by its helper.
export const activityPages = {
    activity: { title: 'activity', access: 'signed-in', render: (ctx) => void ctx.main.append(heading('activity'), h('p', null, 'Not built yet.')) },
};
