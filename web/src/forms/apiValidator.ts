import type { RJSFSchema, ValidatorType } from '@rjsf/utils';

const typeOf = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v);

/**
 * The forms' validator: the API itself. A form is checked by sending it; the
 * 422 that comes back (`ERR - <field> <why>`) is shown next to that field. So
 * the form can never accept what the API refuses or refuse what it accepts.
 * (A browser-side JSON-schema compiler would also need `unsafe-eval`, which
 * the panel's content security policy does not allow.)
 *
 * `isValid` only guides the choice between `oneOf`/`anyOf` options, by type.
 */
export const apiValidator: ValidatorType = {
  validateFormData: () => ({ errors: [], errorSchema: {} }),
  isValid(schema: RJSFSchema, formData: unknown): boolean {
    const t = schema.type;
    if (!t || formData === undefined) return true;
    const actual = typeOf(formData);
    const allowed = Array.isArray(t) ? t : [t];
    return allowed.some((a) => a === actual || (a === 'number' && actual === 'integer')) || (actual === 'null' && (schema as { nullable?: boolean }).nullable === true);
  },
  rawValidation: () => ({ errors: [], validationError: undefined }),
};
