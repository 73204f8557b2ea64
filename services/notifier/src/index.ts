export { notificationHandler, startNotifier } from './notification-consumer.js';
export { buildNotifierApp, type NotifierDeps } from './app.js';
