export { startAllInOne, type AllInOne } from './all-in-one.js';
