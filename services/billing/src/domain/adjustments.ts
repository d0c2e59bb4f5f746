/** What the book keeps of a payment to settle its refunds and disputes. */
export interface PaymentSettlement {
  /** Credits the payment bought (0 until its purchase is known). */
  credits: number;
  refunded_amount: number;
  refunded_of: number | null;
  disputed: boolean;
  revoked: boolean;
}

/**
 * Credits to take back from a payment: all of them while it is disputed or revoked, else the refunded
 * share of the money, rounded up (a partial refund never leaves a fraction of a credit behind).
 */
export function creditsToTakeBack(payment: PaymentSettlement): number {
  if (payment.revoked || payment.disputed) return payment.credits;
  if (payment.refunded_amount <= 0 || !payment.refunded_of) return 0;
  return Math.min(payment.credits, Math.ceil((payment.credits * payment.refunded_amount) / payment.refunded_of));
}
