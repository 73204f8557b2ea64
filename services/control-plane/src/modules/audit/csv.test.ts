import { describe, expect, it } from 'vitest';
import { CSV_COLUMNS, csvCell, csvRow } from './service.js';

describe('audit CSV', () => {
  it('has the spec columns in the spec order', () => {
    expect(CSV_COLUMNS.join(',')).toBe(
      'audit_id,timestamp,actor,agent_id,connection_id,action,decision,metadata',
    );
  });

  it('quotes separators, quotes and line breaks (RFC 4180)', () => {
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('two\nlines')).toBe('"two\nlines"');
    expect(csvCell(null)).toBe('');
  });

  it('neutralises spreadsheet formulas an agent could smuggle into metadata', () => {
    for (const evil of ['=HYPERLINK("http://x")', '+1+1', '-2+3', '@SUM(A1)', '\tcmd']) {
      const cell = csvCell(evil);
      expect(cell.replace(/^"/, '').startsWith("'")).toBe(true);
    }
    const row = csvRow({
      id: '1',
      auditId: 'a',
      timestamp: 't',
      actor: '=cmd|/c calc!A1',
      agentId: null,
      connectionId: null,
      action: 'execution_denied',
      decision: 'denied',
      metadata: { path: '/x,y' },
    });
    expect(row).toBe(`a,t,'=cmd|/c calc!A1,,,execution_denied,denied,"{""path"":""/x,y""}"\r\n`);
  });
});
