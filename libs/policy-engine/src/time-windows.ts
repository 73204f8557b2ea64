/**
 * Time windows. A window opens on `dayOfWeek` (0 = Sunday) from `startHour`:00 to
 * `endHour`:59:59 local time in its IANA `timezone`, both hours inclusive. When `startHour` is
 * after `endHour` the window crosses midnight and ends on the following day. An empty list means
 * always open; otherwise a request passes when any window is open.
 *
 * Local time comes from Intl (the runtime's tz database), so daylight-saving time needs no
 * special case: windows are in wall-clock hours. On a spring-forward day the skipped hour never
 * occurs; on a fall-back day the repeated hour is open both times.
 */
import type { TimeWindow } from '@vlt/contracts';

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

/** Local weekday and hour for one time zone, memoised per 15-minute bucket. */
export class ZoneClock {
  private readonly format: Intl.DateTimeFormat;
  private bucket = Number.NaN;
  private day = 0;
  private hour = 0;

  constructor(readonly timeZone: string) {
    this.format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      weekday: 'short',
      hour: 'numeric',
      hourCycle: 'h23',
    });
  }

  /**
   * Every zone offset in use is a multiple of 15 minutes and transitions happen on such
   * boundaries, so weekday and hour are constant within a UTC quarter-hour.
   */
  local(now: Date): { day: number; hour: number } {
    const bucket = Math.floor(now.getTime() / 900_000);
    if (bucket !== this.bucket) {
      let day = -1;
      let hour = -1;
      for (const part of this.format.formatToParts(now)) {
        if (part.type === 'weekday') day = WEEKDAYS[part.value] ?? -1;
        else if (part.type === 'hour') hour = Number(part.value);
      }
      this.bucket = bucket;
      this.day = day;
      this.hour = hour;
    }
    return { day: this.day, hour: this.hour };
  }
}

export function windowIsOpen(w: TimeWindow, local: { day: number; hour: number }): boolean {
  const { day, hour } = local;
  if (w.startHour <= w.endHour) return day === w.dayOfWeek && hour >= w.startHour && hour <= w.endHour;
  // Crosses midnight: the evening part on dayOfWeek, the morning part on the next day.
  return (day === w.dayOfWeek && hour >= w.startHour) || (day === (w.dayOfWeek + 1) % 7 && hour <= w.endHour);
}

export interface TimeWindowSchedule {
  readonly windows: readonly TimeWindow[];
  isOpen(now: Date): boolean;
}

/** Builds the formatters once; the schedule is what a hydrated policy keeps. */
export function compileTimeWindows(windows: readonly TimeWindow[]): TimeWindowSchedule {
  const clocks = new Map<string, ZoneClock>();
  for (const w of windows) if (!clocks.has(w.timezone)) clocks.set(w.timezone, new ZoneClock(w.timezone));
  return {
    windows,
    isOpen(now: Date): boolean {
      if (windows.length === 0) return true;
      if (Number.isNaN(now.getTime())) return false;
      for (const w of windows) {
        if (windowIsOpen(w, clocks.get(w.timezone)!.local(now))) return true;
      }
      return false;
    },
  };
}

export function isWithinTimeWindows(windows: readonly TimeWindow[], now: Date): boolean {
  return compileTimeWindows(windows).isOpen(now);
}
