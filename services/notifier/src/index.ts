export { notificationHandler, startNotifier, type NotifierDeps } from './notification-consumer.js';
export { buildNotifierApp } from './app.js';
export { planNotification, planSecurityAlert } from './plan.js';
export { transportVia } from '@vlt/notify';
